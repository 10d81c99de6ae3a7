# An ingress rule on a load balancer that is not declared.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
ingress "i" {
  rule {
    loadbalancer = loadbalancer.lb9
    groups       = [group.g]
    route {
      lb_port = 80
      port    = 80
    }
  }
}
