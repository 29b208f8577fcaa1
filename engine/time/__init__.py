"""Time in the plan (issue 29): when running pods end and a waiting pod could start (`timeline`), the
planner's answers at a later time (`timed_plan`), devices in time (`dra_time`) and `simulate`, a trace replayed
on a virtual clock. Grouped because each answers "when", not "where".
"""
