# A size that is not a number.
stack "s" {}
provider "sim" {}
group "g" {
  size = "five"
  instance {
    provider = sim
    type     = "vm"
  }
  flavor { provider = sim }
}
