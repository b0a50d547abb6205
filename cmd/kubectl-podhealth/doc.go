// Command kubectl-podhealth is a kubectl plugin that lists the pods that
// died with their node and force-deletes them safely, with the rules and
// the policy of package health. Installed on the PATH (or through krew) it
// runs as `kubectl podhealth`. See README.md beside this file for its
// flags, its output and its exit codes.
package main
