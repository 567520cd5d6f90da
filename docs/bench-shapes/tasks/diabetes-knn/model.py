from sklearn.neighbors import KNeighborsRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def build():
    return make_pipeline(StandardScaler(), KNeighborsRegressor(n_neighbors=3))
