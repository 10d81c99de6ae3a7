# The mass-failure brake cannot engage on no dead members at all.
stack "s" {}
provider "sim" {}
group "g" {
  size = 3
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
  health { brake_min = 0 }
}
