# A size below zero.
stack "s" {}
provider "sim" {}
group "g" {
  size = -1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
