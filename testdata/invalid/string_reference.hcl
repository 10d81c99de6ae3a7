# References are not strings.
stack "s" {}
provider "simulator" {}
loadbalancer "lb" { provider = "simulator" }
