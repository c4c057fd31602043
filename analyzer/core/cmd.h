/* Entry points of the analyzer's subcommands, dispatched by launcher/main.c. */
#ifndef COMMSCOPE_ANALYZER_CMD_H
#define COMMSCOPE_ANALYZER_CMD_H

/*
 * `commscope analyze RUN_DIR [--json FILE] [--html FILE] [--events FILE] [--pcap FILE...]
 * [--perfetto FILE [--perfetto-window FROM:TO] [--perfetto-steps A:B] [--perfetto-ranks LIST]]
 * [--quiet]`, `commscope analyze --pcap FILE... [...]` (capture files alone) and
 * `commscope analyze --from kineto DIR|FILE... [...]` (PyTorch profiler traces); argv[0] is
 * "analyze".
 * Returns the process exit status: 0 all input read and analysed; 1 analysed, but some input was
 * missing or invalid (each problem said on stderr and in the report); 2 usage error; 3 nothing
 * could be analysed.
 */
int cs_cmd_analyze(int argc, char **argv);

#endif
