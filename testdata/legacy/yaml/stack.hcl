# The walk-through of testdata/e2e with its groups, ingress and enrollment
# kept in the new-schema YAML beside this file. The providers and load
# balancers they name are implied.
stack "mystack" {}
