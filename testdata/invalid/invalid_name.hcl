# A group name must be usable in a reference.
stack "s" {}
provider "sim" {}
group "my group" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
