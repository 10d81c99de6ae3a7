# A reference to an aliased provider that is not declared.
stack "s" {}
provider "simulator" {}
loadbalancer "lb" { provider = simulator.nfs }
