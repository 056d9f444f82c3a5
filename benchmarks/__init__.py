"""The benchmarks of gprf: speed and accuracy against GPyTorch, BoTorch and scikit-learn, measured in the same run.

They are part of the repository, not of the installed package. Run them from the repository root with
``python -m benchmarks [--what LIST] [options]`` (:mod:`benchmarks.bench` lists the sub-benchmarks; ``--help``
every option) after ``pip install -e ".[bench]"``, which adds BoTorch, scikit-learn and matplotlib to gprf.
"""
