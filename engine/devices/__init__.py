"""Devices and volumes: what a pod's claims on things attached to nodes mean. DRA (`dra`, with
partitionable devices and consumable capacity, and `cel/` for device selectors) and PersistentVolumeClaims
(`storage`), each resolved once per snapshot and read by their kinds and the loop's binder.
"""
