"""Predict y from 10 features in [0, 1] (Friedman #1 data; seed: linear regression)."""

from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

DEGREE = 1  # degree of the polynomial features fed to the linear model (1: plain linear regression)


def build_model():
    """Return an unfitted scikit-learn regressor (fit(X, y), predict(X)); it is built afresh for every fold."""
    return make_pipeline(PolynomialFeatures(DEGREE), LinearRegression())
