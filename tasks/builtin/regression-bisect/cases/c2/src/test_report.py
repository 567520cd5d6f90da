import report

MARKS = [18, 35, 27, 40, 9, 20, 32]


def test_summary():
    got = report.summary(MARKS, 40)
    want = {"mean": 64.6, "median": 67.5, "best": [100.0, 87.5]}
    assert got == want, f"report.summary(MARKS, 40) returned {got!r}, expected {want!r}"


def test_class_mean_of_nothing():
    got = report.class_mean([], 40)
    assert got == 0.0, f"report.class_mean([], 40) returned {got!r}, expected 0.0"


def test_zero_out_of():
    got = report.scores([3, 4], 0)
    assert got == [0.0, 0.0], f"report.scores([3, 4], 0) returned {got!r}, expected [0.0, 0.0]"


def test_pass_count():
    got = report.pass_count(MARKS, 40)
    assert got == 5, f"report.pass_count(MARKS, 40) returned {got!r}, expected 5"


def test_grades():
    got = report.grades(MARKS, 40)
    want = ["F", "B", "D", "A", "F", "F", "B"]
    assert got == want, f"report.grades(MARKS, 40) returned {got!r}, expected {want!r}"


def test_normalised():
    got = report.normalised([10, 25, 40], 40)
    assert got == [0.0, 50.0, 100.0], f"report.normalised([10, 25, 40], 40) returned {got!r}"


def test_curve():
    got = report.curve([38, 20], 40, 10)
    assert got == [100.0, 60.0], f"report.curve([38, 20], 40, 10) returned {got!r}, expected [100.0, 60.0]"
