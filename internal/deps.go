// Package internal holds helpers shared by pipes' own tests and commands.
package internal
