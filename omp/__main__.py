from omp.cli import main

main()
