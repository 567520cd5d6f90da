"""Score a regressor on Friedman #1 data by its root-mean-square error under repeated K-fold cross-validation.

The procedure and its trust boundary are `arts.tasks.tabular`'s: each fold is fitted in a fresh process,
confined so that it reads no data file, which receives only that fold's rows; this evaluator never
imports the candidate and computes the score itself.
"""

from arts.tasks import tabular

if __name__ == "__main__":
    tabular.main(__file__, "regression")
