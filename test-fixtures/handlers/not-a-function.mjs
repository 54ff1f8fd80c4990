export default { handle: true };
