# Two groups with one name.
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
group "g" {
  size = 2
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
