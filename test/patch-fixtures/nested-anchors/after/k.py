class A:
    def f(self):
        pass
class B:
    def f(self):
        return 2
