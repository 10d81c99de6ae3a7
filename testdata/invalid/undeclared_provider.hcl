# A reference to a provider that is not declared (a typo).
stack "s" {}
provider "simulator" {}
loadbalancer "lb" { provider = simulatr }
