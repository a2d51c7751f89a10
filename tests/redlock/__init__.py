"""Redlock over 3 and 5 real redis-server processes, on both cores.

Servers shared by the session stay up; tests that stop, pause or restart a master get their
own. Nothing is mocked: a master "down" is a stopped process, a "slow" one is SIGSTOPped.
"""
