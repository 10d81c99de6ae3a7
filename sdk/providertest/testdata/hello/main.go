// Command hello is a trivial main package the Builder tests build.
package main

import "fmt"

func main() { fmt.Println("hello from providertest") }
