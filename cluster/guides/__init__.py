"""The guides followed on a cluster of machines: ``python -m cluster.guides`` (make guides).

docs/deploy.md, docs/upgrade.md and docs/integrate.md are read and their
commands run as written on machines made of network namespaces with their
own filesystem layers (machines.py), with systemd's part played by units.py,
then each step's outcome is checked (deploy.py, integrate.py, upgrade.py).
"""
