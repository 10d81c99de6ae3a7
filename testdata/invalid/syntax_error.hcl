# A missing closing quote.
stack "s" {}
provider "sim" {}
group "g" {
  size = "5
}
