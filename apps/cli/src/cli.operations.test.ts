// The CLI as an operator runs it on SQLite: the shared scenario groups besides the commands themselves
// (stop and restart, logs, metrics, doctor, inspect, progress, dashboard), a file of their own so that they run
// beside the command scenarios.
import { CLI_SCENARIO_GROUPS, cliScenarios } from './test/cli-scenarios.js';
import { sqliteCliTarget } from './test/cli-targets.js';

cliScenarios('statusq CLI on SQLite', sqliteCliTarget, CLI_SCENARIO_GROUPS.filter((group) => group !== 'commands'));
