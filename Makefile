# Developer shortcuts. `make help` lists them.
PYTHON ?= python
SCHEDULER = $(PYTHON) -m engine
POLICIES = policies
POLICIES_CONFIGMAP = deploy/policies-configmap.yaml

.PHONY: help check-policies policies-configmap test

help:
	@echo "make check-policies      check and test the policy library ($(POLICIES)/)"
	@echo "make policies-configmap  regenerate $(POLICIES_CONFIGMAP) from $(POLICIES)/"
	@echo "make test                run the whole test suite"

check-policies:
	$(SCHEDULER) check $(POLICIES)/
	$(SCHEDULER) test $(POLICIES)/

# Written to a temporary file first so that a policy error leaves the old ConfigMap in place.
policies-configmap:
	$(SCHEDULER) configmap $(POLICIES)/ > $(POLICIES_CONFIGMAP).tmp
	mv $(POLICIES_CONFIGMAP).tmp $(POLICIES_CONFIGMAP)

test:
	$(PYTHON) -m pytest -q
