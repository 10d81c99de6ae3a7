# A group without a flavor block.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
    type     = "vm"
  }
}
