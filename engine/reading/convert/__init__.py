"""Converters from Kubernetes manifests (parsed dicts) to the typed model, one module per object family.

Pure: each reads one object (or one field) and raises what `fields.PROBLEMS` lists for input the model cannot
read; `engine.reading.load` assembles a cluster from them.
"""
