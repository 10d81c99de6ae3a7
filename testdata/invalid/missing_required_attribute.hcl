# An instance block without a type.
stack "s" {}
provider "sim" {}
group "g" {
  size = 1
  instance {
    provider = sim
  }
  flavor { provider = sim }
}
