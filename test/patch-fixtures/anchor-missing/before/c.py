def a():
    return 0
