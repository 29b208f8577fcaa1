# Developer shortcuts. `make help` lists them.
PYTHON ?= python
SCHEDULER = $(PYTHON) -m engine
POLICIES = policies
POLICIES_CONFIGMAP = deploy/components/example-policies/policies-configmap.yaml
# deploy/'s files the Helm chart renders from: copies, because helm warns on every command about a symlink
CHART_FILES = deploy/clusterrole.yaml deploy/components/podgroup-crd/podgroup-crd.yaml

.PHONY: help check-policies policies-configmap chart-files schemas test bench bench-quick bench-medium

help:
	@echo "make check-policies      check and test the policy library ($(POLICIES)/)"
	@echo "make policies-configmap  regenerate $(POLICIES_CONFIGMAP) from $(POLICIES)/"
	@echo "make chart-files         copy $(CHART_FILES) into the Helm chart's files/"
	@echo "make schemas             regenerate engine/data/schemas.json (the fields of every kind read; testkit/schemas.py)"
	@echo "make test                run the whole test suite"
	@echo "make bench-quick         side by side with kube-scheduler and Coscheduling, 100 nodes (minutes)"
	@echo "make bench-medium        the same at 500 and 1,000 nodes"
	@echo "make bench               the full comparison, 100 to 5,000 nodes, 3 repeats (hours)"

check-policies:
	$(SCHEDULER) check $(POLICIES)/
	$(SCHEDULER) test $(POLICIES)/

# Written to a temporary file first so that a policy error leaves the old ConfigMap in place.
policies-configmap:
	$(SCHEDULER) configmap $(POLICIES)/ > $(POLICIES_CONFIGMAP).tmp
	mv $(POLICIES_CONFIGMAP).tmp $(POLICIES_CONFIGMAP)

chart-files:
	cp $(CHART_FILES) deploy/helm/policy-scheduler/files/

# The schemas unknown fields are found against: the client's models, deploy/'s CRDs, 1.36.3's OpenAPI (Go module cache).
schemas:
	$(PYTHON) -c "from engine.reading.objects import API_VERSIONS; from testkit.schemas import write; write(API_VERSIONS)"

test:
	$(PYTHON) -m pytest -q

# Side-by-side benchmarks (bench/compare.py): rewrite their section of BENCHMARKS.md and bench/compare_*.png.
bench-quick:
	$(PYTHON) bench/compare.py --mode quick

bench-medium:
	$(PYTHON) bench/compare.py --mode medium

bench:
	$(PYTHON) bench/compare.py --mode full
