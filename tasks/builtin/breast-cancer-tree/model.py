"""Classify breast tumours as malignant (0) or benign (1) from 30 measurements (seed: one decision tree)."""

from sklearn.tree import DecisionTreeClassifier


def build_model():
    """Return an unfitted scikit-learn classifier (fit(X, y), predict(X)); it is built afresh for every fold."""
    return DecisionTreeClassifier(random_state=0)
