"""Planning one batch and the pipeline around it: pods into classes, compile (every kind's filter and score)
into the solver's problem (engine.solve solves it), explain who was left out, the plan; `planner` runs place →
reserve → preempt, and `isolation` keeps a failure to the pods it concerns.
"""
