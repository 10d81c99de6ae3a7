# The walk-through of testdata/e2e with its groups, ingress and enrollment
# kept in the old JSON formats beside this file: groups.json is the legacy
# group JSON, ingress.json and enrollment.json the new schema written as
# JSON. The providers and load balancers they name are implied.
stack "mystack" {}
