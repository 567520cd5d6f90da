"""Score a breast-cancer classifier by its accuracy under repeated stratified cross-validation on data/train.npz.

The procedure and its trust boundary are `arts.tasks.tabular`'s: each fold is fitted in a fresh process,
confined so that it reads no data file, which receives only that fold's rows; this evaluator never
imports the candidate and computes the score itself.
"""

from arts.tasks import tabular

if __name__ == "__main__":
    tabular.main(__file__, "classification")
