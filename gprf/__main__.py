"""``python -m gprf compare ...`` (see :mod:`gprf.cli`)."""

from gprf.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
