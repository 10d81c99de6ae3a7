# An autoscale block needs a check.
stack "s" {}
provider "sim" {}
provider "prometheus" {}
group "web" {
  size = 2
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  autoscale {
    min = 2
    max = 12
  }
}
