/* cli.h — subcommands of the specdec program. Each returns the process exit code
 * (0 success, 1 runtime failure, 2 usage error). argv[0] is the subcommand name. */
#ifndef SPECDEC_CLI_H
#define SPECDEC_CLI_H

int cli_cmd_generate(int argc, char **argv);
int cli_cmd_info(int argc, char **argv);
int cli_cmd_tokenize(int argc, char **argv);

/* Directory of the bundled model pair (models/ in the source tree, or the installed
 * share/specdec/models), or NULL if neither exists. */
const char *cli_bundled_models_dir(void);

#endif
