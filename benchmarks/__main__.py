"""``python -m benchmarks [options]`` from the repository root (see :mod:`benchmarks.bench`)."""

from benchmarks.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
