"""Classify 8x8 images of handwritten digits (64 pixel intensities, 0-16) as 0-9 (seed: logistic regression)."""

from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

C = 1.0  # inverse regularisation strength
MAX_ITER = 1000


def build_model():
    """Return an unfitted scikit-learn estimator (fit(X, y), predict(X)); it is built afresh for every fold."""
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=MAX_ITER))
