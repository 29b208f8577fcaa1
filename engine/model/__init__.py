"""The model and what every stage reads of it: the typed cluster (`cluster`), the rule IR every front end
writes (`ir`, `podspec`), quantities, gangs, units in line, and the tables and views the filters, compile,
preemption and time ask about nodes and bound pods. The bottom layers: pure, and they import nothing above.
"""
