"""Tenants and their quotas (issue 19): whose quota a pod counts toward, the figures the batch model and the
reports read, and the per-tenant report around a plan. One concept read by compile, preemption and the outputs.
"""
