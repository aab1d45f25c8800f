import concurrent.futures
class Future(concurrent.futures.Future): pass
