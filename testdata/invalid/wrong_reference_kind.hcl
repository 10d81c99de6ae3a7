# An enrollment's source is a group, not a load balancer.
stack "s" {}
provider "sim" {}
loadbalancer "lb1" { provider = sim }
enrollment "e" {
  source = loadbalancer.lb1
  target {
    provider = sim
    type     = "disk"
  }
}
