# A group with two instance blocks.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  instance {
    provider = sim
    type     = "container"
  }
  flavor { provider = sim }
}
