# An enrollment without a target.
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
enrollment "e" {
  source = group.g
}
