# An ingress rule needs at least one group.
stack "s" {}
provider "sim" {}
loadbalancer "lb" { provider = sim }
ingress "i" {
  rule {
    loadbalancer = loadbalancer.lb
    groups       = []
    route {
      lb_port = 80
      port    = 80
    }
  }
}
