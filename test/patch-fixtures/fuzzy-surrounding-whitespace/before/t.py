def f():
    if x:
        return 1
