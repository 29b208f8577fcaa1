"""The model's reading: snapshot files and API objects in, one typed cluster out. `manifests` reads files,
`objects` is the registry of kinds read, `convert/` reads one object each, `load` assembles them and `resolve`
says what the pods mean together. Everything that turns YAML or the API's objects into the model is here.
"""
