# Two routes publishing one port of one load balancer.
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
loadbalancer "lb" { provider = sim }
ingress "i" {
  rule {
    loadbalancer = loadbalancer.lb
    groups       = [group.g]
    route {
      lb_port = 80
      port    = 8080
    }
  }
}
ingress "j" {
  rule {
    loadbalancer = loadbalancer.lb
    groups       = [group.g]
    route {
      lb_port = 443
      port    = 8443
    }
  }
}
